// The Node side of runnel's code-mode benchmark (docs/benchmarks.md, "Code
// mode"): the same scripts as internal/codemode's BenchmarkRun100Calls, each
// run in a fresh node:vm context, the approach of the existing code-mode
// implementations. Tools are async functions that resolve at once with the
// same payload as the Go benchmark's Caller; like an MCP bridge they
// serialise the arguments and parse the result. Prints one line per script
// in `go test -bench` format, so bench/codemode.sh can read both sides alike:
// the mean and median wall time per run, and, as cpu-ns/run, the CPU time of
// the whole process (every thread: the JIT and the garbage collector
// included) over the timed runs, divided by their number.
//
//   node vm.mjs [--time seconds]
import vm from "node:vm";
import { readFileSync } from "node:fs";
import { performance } from "node:perf_hooks";

const payload = '{"ok":true,"n":1,"items":["a","b","c"]}';
const dir = new URL(".", import.meta.url);
const seconds = Number(process.argv[process.argv.indexOf("--time") + 1]) || 2;

function makeTools() {
  const call = async (server, tool, args) => {
    JSON.stringify(args === undefined ? {} : args);
    return JSON.parse(payload);
  };
  return { bench: { echo: (args) => call("bench", "echo", args) } };
}

// runOnce is one run_mcp_script: a fresh context with tools and a captured
// console, the script as the body of an async function, the result as JSON.
async function runOnce(script) {
  const logs = [];
  const console = { log: (...args) => logs.push(args.map(String).join(" ")) };
  const context = vm.createContext(
    { tools: makeTools(), console },
    { codeGeneration: { strings: false, wasm: false } },
  );
  const result = await vm.runInContext("(async () => {" + script + "\n})()", context, { timeout: 30000 });
  return JSON.stringify(result === undefined ? null : result);
}

for (const name of ["sequential", "parallel"]) {
  const script = readFileSync(new URL(name + ".js", dir), "utf8");
  for (let i = 0; i < 50; i++) await runOnce(script); // warm-up: JIT and caches
  const times = [];
  const cpu = process.cpuUsage();
  const end = performance.now() + seconds * 1000;
  while (performance.now() < end) {
    const start = performance.now();
    const out = await runOnce(script);
    times.push(performance.now() - start);
    if (out !== "100") throw new Error(name + ": got " + out);
  }
  const used = process.cpuUsage(cpu); // microseconds
  const mean = times.reduce((a, b) => a + b, 0) / times.length;
  times.sort((a, b) => a - b);
  const median = times[Math.floor(times.length / 2)];
  const cpuPerRun = ((used.user + used.system) * 1e3) / times.length;
  console.log(
    "BenchmarkNodeVM/" + name + " " + times.length + " " + Math.round(mean * 1e6) + " ns/op " +
    Math.round(median * 1e6) + " median-ns/op " + Math.round(mean * 1e6) + " ns/run " +
    Math.round(cpuPerRun) + " cpu-ns/run",
  );
}
