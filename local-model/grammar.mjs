// The grammar that holds a local model's answer to a JSON Schema
// (`response_format: json_schema`), shared by the server and
// check-schemas.mjs.
//
// node-llama-cpp's own schema grammar allows a line break only before an
// indent of four spaces per level (or none at all). Qwen copies the layout
// of a prompt's example (two spaces, then three) and, meeting a forbidden
// indent, closes the list at once: an empty `candidates` for a meeting full
// of decisions (evals/extraction.jsonl, x01). So the grammar is rebuilt
// with any short run of blanks and line breaks wherever it allows
// whitespace; the structure, the keys and the enums stay constrained.

// node-llama-cpp 3.21.1 (pinned in package-lock.json) exports the grammar
// builder only inside its package: imported by file.
const { getGbnfGrammarForGbnfJsonSchema } = await import(
  new URL("./node_modules/node-llama-cpp/dist/utils/gbnfJson/getGbnfGrammarForGbnfJsonSchema.js", import.meta.url)
);

const BLANKS = "[ \\t\\n]{0,24}";

/** `gbnf` with every whitespace rule (and comma-whitespace rule) widened. */
export function flexibleWhitespace(gbnf) {
  return gbnf
    .split("\n")
    .map((line) => {
      const m = /^((comma-)?whitespace-[a-z0-9-]*rule) ::= /.exec(line);
      return m ? `${m[1]} ::= ${m[2] ? '"," ' : ""}${BLANKS}` : line;
    })
    .join("\n");
}

/** The grammar for `schema`; throws when the runtime cannot express it. */
export async function schemaGrammar(llama, schema) {
  return llama.createGrammar({
    grammar: flexibleWhitespace(getGbnfGrammarForGbnfJsonSchema(schema)),
    stopGenerationTriggers: ["\n\n\n\n"],
    trimWhitespaceSuffix: true,
  });
}
