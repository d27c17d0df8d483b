// Public entry of the gateway <-> agent contract. The code under gen/ is generated
// by `make proto` from agent/v1/agent.proto; never edit it by hand.
export * from "./gen/agent/v1/agent.js";
