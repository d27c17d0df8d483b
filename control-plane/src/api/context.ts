// What api routes need from the process: config, database, bus.
import type { Knex } from "knex";
import type { JobBus } from "../bus/job-bus.js";
import type { Config } from "../config.js";

export interface ApiContext {
  config: Config;
  db: Knex;
  bus: JobBus;
  /** The result of a finished operation, read from its row. */
  readResult(
    operationId: string,
  ): Promise<{ exit_code: number; stdout: string; stderr: string; duration_ms: number }>;
}
