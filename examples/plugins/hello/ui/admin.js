/* global document */
// The example plugin's admin page: registry.json lists this file under uiAssets.entries with
// "surface": "admin", and the admin console shows it as the page "hello" while the plugin is active. The
// console imports it and calls mount(element, host) (docs/plugins.md, "Admin pages"); the function it
// returns runs when the operator leaves the page.
export function mount(element, host) {
  const heading = document.createElement("h2");
  heading.textContent = "Greetings";
  const count = document.createElement("p");
  count.setAttribute("role", "status");
  const button = document.createElement("button");
  button.type = "button";
  button.textContent = "Greet the operator";
  const answer = document.createElement("p");

  async function refresh() {
    // GET /api/plugins/hello/stats: the key hello.greeting.read; the answer's status says otherwise.
    const response = await host.fetch("stats");
    count.textContent = response.ok
      ? `Greetings given by this worker: ${(await response.json()).greetings}`
      : `The stats answered ${response.status}.`;
  }

  button.addEventListener("click", async () => {
    const response = await host.fetch(`greeting?name=${encodeURIComponent(host.session.name)}`);
    answer.textContent = response.ok
      ? (await response.json()).greeting
      : `The greeting answered ${response.status}.`;
    await refresh();
  });

  element.append(heading, count, button, answer);
  void refresh();
  return () => element.replaceChildren();
}
