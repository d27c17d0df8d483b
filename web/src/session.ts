// Who is signed in (GET /api/me): the user, their role and their organization,
// available to every page. What a page offers follows `may`: the routes the
// control plane says this person may call (read from its route declarations),
// so the dashboard keeps no list of its own of who may do what.
import { createContext } from "preact";
import { useContext } from "preact/hooks";
import type { Me } from "./api";

export interface Who {
  email: string;
  role: "owner" | "deployer" | "viewer";
  tenantId: string;
  tenantName: string;
  csrf: string;
  /** Whether this person may call the route `METHOD /url` (the URL as declared, e.g. /api/applications/:id). */
  may: (route: string) => boolean;
}

export function whoOf(me: Me): Who {
  return {
    email: me.user?.email ?? "",
    role: me.user?.role ?? "viewer",
    tenantId: me.tenant?.id ?? me.tenant_id ?? "",
    tenantName: me.tenant?.name ?? me.tenant_name ?? "",
    csrf: me.csrf_token ?? "",
    may: (route) => (me.may ?? []).includes(route),
  };
}

export const WhoContext = createContext<Who | undefined>(undefined);

export function useWho(): Who {
  const who = useContext(WhoContext);
  if (!who) throw new Error("useWho outside the signed-in shell");
  return who;
}
