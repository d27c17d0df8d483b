// The API paths of one application, shared by its page's parts.

/** The application routes as the control plane declares them (what `who.may` is asked about). */
export const APP_ROUTE = "/api/tenants/:tenant_id/applications/:application_id";

export const appBase = (tenantId: string, appId: string) =>
  `/api/tenants/${encodeURIComponent(tenantId)}/applications/${encodeURIComponent(appId)}`;
