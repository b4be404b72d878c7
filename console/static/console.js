// The console's one script: "select the page" on the dead letters list.
// Served from this origin (the Content-Security-Policy allows no inline
// script); every page works without it.
"use strict";
document.addEventListener("DOMContentLoaded", function () {
  var all = document.getElementById("select-all");
  if (!all) return;
  all.addEventListener("change", function () {
    document.querySelectorAll("input.pick").forEach(function (box) { box.checked = all.checked; });
  });
});
