// The face of the api service: the app and its HTTP server.
export { createApp, type AppDeps, type TasklineApi } from './app.js';
export { serve, type RunningServer } from './server.js';
