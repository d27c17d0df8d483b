// Public entry of relayctl's protobuf contracts. The code under gen/ is generated
// by `make proto` from agent/v1/agent.proto (gateway <-> agent) and
// bus/v1/bus.proto (api <-> gateway over the job bus); never edit it by hand.
export * from "./gen/agent/v1/agent.js";
export { DispatchReply, OperationDone, Takeover } from "./gen/bus/v1/bus.js";
