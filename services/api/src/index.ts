export { createApp, type AppDeps, type TasklineApi } from './app.js';
export { serve, type RunningServer } from './server.js';
