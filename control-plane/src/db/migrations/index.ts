// Migrations are listed here explicitly (not read from a folder) so they work the
// same from src/ under tsx and from dist/ after the build.
import type { Knex } from "knex";
import * as m001 from "./001_init.js";

interface Migration {
  up(knex: Knex): Promise<void>;
  down(knex: Knex): Promise<void>;
}

const MIGRATIONS: Record<string, Migration> = {
  "001_init": m001,
};

export const migrationSource: Knex.MigrationSource<string> = {
  getMigrations: async () => Object.keys(MIGRATIONS).sort(),
  getMigrationName: (name) => name,
  getMigration: async (name) => MIGRATIONS[name],
};
