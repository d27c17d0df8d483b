// Public entry of the control plane package (used by tooling and tests).
export { loadConfig, type Config } from "./config.js";
export { serve } from "./serve.js";
export { ERRORS, RcError, type ErrorCode } from "./errors.js";
export { canonicalJson, eventHash } from "./audit/audit-log.js";
