// fxinspect explorer: figures and text as the page writes them: a number in its unit (bytes,
// seconds, a count, an SI unit of its own), as fxinspect's formatting writes it, and text
// escaped for HTML. Loaded before explorer.js.
function fxinspectFormat() {
  "use strict";
  function scaled(v, steps, base) {
    let i = 0;
    while (Math.abs(v) >= base && i < steps.length - 1) { v /= base; i++; }
    return (i === 0 && Number.isInteger(v) ? String(v) : v.toFixed(2)) + (steps[i] ? " " + steps[i] : "");
  }
  function format(v, unit) {
    if (v === null || v === undefined) return "—";
    if (unit === "bytes") return scaled(v, ["B", "KiB", "MiB", "GiB", "TiB"], 1024).replace(/^(\d+) B$/, "$1 B");
    if (unit === "seconds") {
      if (v < 1e-3) return (v * 1e6).toFixed(1) + " µs";
      if (v < 1) return (v * 1e3).toFixed(2) + " ms";
      return v.toFixed(2) + " s";
    }
    if (unit && unit.startsWith("si:")) { // a unit of its own (joules): SI prefixes, as fmt.si
      const symbol = unit.slice(3);
      if (v === 0) return "0 " + symbol;
      const prefixes = [[1e9, "G"], [1e6, "M"], [1e3, "k"], [1, ""], [1e-3, "m"], [1e-6, "µ"], [1e-9, "n"], [1e-12, "p"]];
      const [size, prefix] = prefixes.find(([size]) => Math.abs(Number((v / size).toFixed(2))) >= 1) || prefixes[prefixes.length - 1];
      return (v / size).toFixed(2) + " " + prefix + symbol;
    }
    return scaled(v, ["", "K", "M", "G", "T", "P"], 1000);
  }
  function esc(s) {
    return String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
  }
  function trim(text) { return text.replace(/\.0+(?= )/, "").replace(/(\.\d*?)0+(?= )/, "$1"); } // 100.00 K -> 100 K
  return { format: format, esc: esc, trim: trim };
}
