// Preloaded into the services tests start: writes V8's compiled code to NODE_COMPILE_CACHE once the
// service has loaded its modules. Node.js writes it at a normal exit, and tests stop services by
// SIGKILL. A no-op where the runtime has no compile cache (Node.js before 22.10).
import module from 'node:module';

const flush = (module as { flushCompileCache?: () => void }).flushCompileCache;
if (flush) setTimeout(flush, 2000).unref();
