// What the SDK scripts share: a check that stops the script at the first failure, naming it, and
// the chunks of a stream collected into an array.

let passed = 0;
let label = "";

/// Names the script's failures ("FAIL (events): ...").
export function checking(name) {
  label = name;
}

/// Counts a check that holds; prints what failed (and `extra`, shortened) and exits 1 otherwise.
export function check(cond, what, extra) {
  if (!cond) {
    const where = label ? ` (${label})` : "";
    console.error(`FAIL${where}: ${what}` + (extra === undefined ? "" : `: ${JSON.stringify(extra).slice(0, 800)}`));
    process.exit(1);
  }
  passed++;
}

/// How many checks held so far.
export function checks() {
  return passed;
}

/// Every chunk of an SDK stream.
export async function collect(gen) {
  const out = [];
  for await (const chunk of gen) out.push(chunk);
  return out;
}
