import test from "ava";
import { DOCKER_HUB_URL, InvalidRegistryAddress, resolveRegistry } from "./registry-address.js";

const cases: [string, string, string][] = [
  ["", DOCKER_HUB_URL, "dockerhub"],
  ["docker.io", DOCKER_HUB_URL, "dockerhub"],
  ["https://index.docker.io/v1/", DOCKER_HUB_URL, "dockerhub"],
  ["registry-1.docker.io", DOCKER_HUB_URL, "dockerhub"],
  ["ghcr.io", "ghcr.io", "ghcr"],
  ["https://GHCR.io/", "ghcr.io", "ghcr"],
  ["123456789012.dkr.ecr.eu-west-1.amazonaws.com", "123456789012.dkr.ecr.eu-west-1.amazonaws.com", "ecr"],
  [
    "123456789012.dkr.ecr.cn-north-1.amazonaws.com.cn",
    "123456789012.dkr.ecr.cn-north-1.amazonaws.com.cn",
    "ecr",
  ],
  ["public.ecr.aws", "public.ecr.aws", "ecr"],
  ["gcr.io", "gcr.io", "gcr"],
  ["eu.gcr.io", "eu.gcr.io", "gcr"],
  ["europe-west1-docker.pkg.dev", "europe-west1-docker.pkg.dev", "artifact-registry"],
  ["myregistry.azurecr.io", "myregistry.azurecr.io", "acr"],
  ["registry.gitlab.com", "registry.gitlab.com", "gitlab"],
  ["registry.gitlab.example.com:5050", "registry.gitlab.example.com:5050", "gitlab"],
  ["quay.io", "quay.io", "quay"],
  ["http://127.0.0.1:5000", "127.0.0.1:5000", "generic"],
  ["registry.example.com/some/path", "registry.example.com", "generic"],
  ["localhost:5000", "localhost:5000", "generic"],
  ["[::1]:5000", "[::1]:5000", "generic"],
  // Look-alikes are not the provider.
  ["ghcr.io.evil.example", "ghcr.io.evil.example", "generic"],
  ["notquay.io", "notquay.io", "generic"],
  [
    "123.dkr.ecr.eu-west-1.amazonaws.com.evil.example",
    "123.dkr.ecr.eu-west-1.amazonaws.com.evil.example",
    "generic",
  ],
];

test("registry address - registry_url and registry_type derived from the address", (t) => {
  for (const [address, url, type] of cases) {
    t.deepEqual(resolveRegistry(address), { registry_url: url, registry_type: type }, address);
  }
});

test("registry address - things that are no registry address are refused", (t) => {
  for (const bad of [
    "-u",
    "a b",
    "host:99999",
    "host:0",
    "user@host",
    "ht tp://x",
    "a..b",
    "--password=x",
    "/",
  ]) {
    t.throws(() => resolveRegistry(bad), { instanceOf: InvalidRegistryAddress }, bad);
  }
});
