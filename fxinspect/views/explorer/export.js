// fxinspect explorer: the view drawn, saved as a file. The SVG holds all of the drawing
// (not only the part in sight), at scale 1, with each element's styles written on it, so
// it shows the same anywhere; the PNG is that SVG rendered on a canvas. Loaded before
// explorer.js.
function fxinspectExport(graph, name) {
  "use strict";
  // the styles the page's sheet gives the drawing, written on each element of the copy
  const STYLED = ["fill", "stroke", "stroke-width", "stroke-dasharray", "opacity", "font-family", "font-size", "font-weight", "text-anchor", "dominant-baseline"];
  const MAX_PIXELS = 16e6, MAX_SIDE = 16384; // what a canvas can hold in any browser

  function text() {
    const view = graph.querySelector("g.view");
    const box = view.getBBox(); // the drawing's extent, without the zoom's transform
    const copy = graph.cloneNode(true);
    copy.querySelector("g.view").removeAttribute("transform");
    const from = graph.querySelectorAll("*"), to = copy.querySelectorAll("*");
    from.forEach((el, i) => {
      const style = getComputedStyle(el);
      to[i].setAttribute("style", STYLED.map((p) => `${p}:${style.getPropertyValue(p)}`).join(";"));
      to[i].removeAttribute("class");
    });
    copy.removeAttribute("style");
    const pad = 10, w = Math.ceil(box.width + 2 * pad), h = Math.ceil(box.height + 2 * pad);
    for (const attr of ["id", "data-part", "class"]) copy.removeAttribute(attr);
    copy.setAttribute("xmlns", "http://www.w3.org/2000/svg");
    copy.setAttribute("width", w);
    copy.setAttribute("height", h);
    copy.setAttribute("viewBox", `${box.x - pad} ${box.y - pad} ${w} ${h}`);
    copy.insertAdjacentHTML("afterbegin", `<rect x="${box.x - pad}" y="${box.y - pad}" width="${w}" height="${h}" fill="#ffffff"/>`);
    return { text: new XMLSerializer().serializeToString(copy), w: w, h: h };
  }
  function save(blob, suffix) {
    const a = document.createElement("a");
    a.href = URL.createObjectURL(blob);
    a.download = name + suffix;
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(a.href), 60000);
  }
  function svg() {
    save(new Blob([text().text], { type: "image/svg+xml" }), ".svg");
  }
  function png() {
    const { text: drawn, w, h } = text();
    const k = Math.min(2, Math.sqrt(MAX_PIXELS / (w * h)), MAX_SIDE / w, MAX_SIDE / h); // sharp, but never past a canvas's size
    const image = new Image();
    image.onload = () => {
      const canvas = document.createElement("canvas");
      canvas.width = Math.max(1, Math.round(w * k));
      canvas.height = Math.max(1, Math.round(h * k));
      const context = canvas.getContext("2d");
      context.scale(k, k);
      context.drawImage(image, 0, 0, w, h);
      canvas.toBlob((blob) => save(blob, ".png"), "image/png");
    };
    image.onerror = () => console.error("fxinspect: the view's SVG did not render as a picture; save it as SVG instead");
    image.src = "data:image/svg+xml;charset=utf-8," + encodeURIComponent(drawn);
  }
  return { svg: svg, png: png, text: () => text().text };
}
