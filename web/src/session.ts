// Who is signed in (GET /api/me): the user, their role and their organization,
// available to every page.
import { createContext } from "preact";
import { useContext } from "preact/hooks";
import type { Me } from "./api";

export interface Who {
  email: string;
  role: "owner" | "member";
  tenantId: string;
  tenantName: string;
  csrf: string;
}

export function whoOf(me: Me): Who {
  return {
    email: me.user?.email ?? "",
    role: me.user?.role ?? "member",
    tenantId: me.tenant?.id ?? me.tenant_id ?? "",
    tenantName: me.tenant?.name ?? me.tenant_name ?? "",
    csrf: me.csrf_token ?? "",
  };
}

export const WhoContext = createContext<Who | undefined>(undefined);

export function useWho(): Who {
  const who = useContext(WhoContext);
  if (!who) throw new Error("useWho outside the signed-in shell");
  return who;
}
