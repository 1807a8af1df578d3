// Sessions timeline: filled in when the server reports the feature.
import { h } from "../dom.js";

export async function render() {
  return h("p", { class: "muted" }, "Sessions are not available on this server.");
}
