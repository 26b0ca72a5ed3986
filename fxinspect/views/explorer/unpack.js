// fxinspect explorer: the page's data unpacked (pack.py wrote its nodes and modules as
// columns, each repeated value once). Loaded before explorer.js.
function fxinspectUnpack(data) {
  "use strict";
  function records(packed) { // {n, columns, keys?} -> the list (or, with keys, the dict) of records
    const rows = Array.from({ length: packed.n }, () => ({}));
    for (const [field, column] of Object.entries(packed.columns)) {
      if (column.all) { column.all.forEach((v, i) => { rows[i][field] = v; }); continue; }
      // (records that share a value share it: the data is read, never written)
      const of = Array.isArray(column.of) ? column.of : records(column.of);
      for (let i = 0; i < rows.length; i++) {
        const j = column.at ? column.at[i] : 0;
        if (j >= 0) rows[i][field] = of[j];
      }
    }
    return packed.keys ? Object.fromEntries(packed.keys.map((k, i) => [k, rows[i]])) : rows;
  }
  const out = Object.assign({}, data);
  for (const key of ["nodes", "modules"]) out[key] = records(data[key]);
  return out;
}
