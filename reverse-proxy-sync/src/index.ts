// reverse-proxy-sync: turns desired routes into reverse-proxy configuration.
// Empty until the external-deploy issue; the package exists so the layout is
// complete and the build graph is stable.
export const PACKAGE = "@relayctl/reverse-proxy-sync";
