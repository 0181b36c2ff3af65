// The face of @taskline/admission: admission, tenant limits, failed authentications, nesting depth.
export { Admission, callerLeft, type AdmissionDeps, type Created } from './admission.js';
export { TenantLimits, type LimitSettings, type StreamSlot, type TaskReservation } from './limits.js';
export { MAX_NESTING, nestedDeeperThan } from './nesting.js';
export { AuthFailureLimits, type AuthFailureSettings } from './auth-failures.js';
