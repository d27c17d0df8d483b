// Process trees from /proc: the shared implementation lives in @relayctl/devkit.
export { descendants, killGroupQuietly, killQuietly, killTreeSync } from "@relayctl/devkit";
