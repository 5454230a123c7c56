// Compiles JSON Schemas into node-llama-cpp grammars, as the local model
// server does for `response_format: json_schema`, and reports each one
// that the runtime refuses. Used by the real-model tier's test that every
// schema the app sends can constrain the local model.
//
//   node check-schemas.mjs FILE.json     (a JSON object: name -> schema)
import { readFileSync } from "node:fs";
import { getLlama } from "node-llama-cpp";
import { schemaGrammar } from "./grammar.mjs";

const schemas = JSON.parse(readFileSync(process.argv[2], "utf8"));
const llama = await getLlama({ gpu: false, build: "never", logLevel: "error" });
let failed = 0;
for (const [name, schema] of Object.entries(schemas)) {
  try {
    await schemaGrammar(llama, schema);
    process.stdout.write(`ok ${name}\n`);
  } catch (e) {
    failed++;
    process.stdout.write(`refused ${name}: ${e.message}\n`);
  }
}
process.exit(failed ? 1 : 0);
