"use strict";
async function tick() {
  const r = await fetch("/api/v1/status");
  const s = await r.json();
  document.getElementById("status").textContent = JSON.stringify(s, null, 2);
}
tick();
setInterval(tick, 1000);
