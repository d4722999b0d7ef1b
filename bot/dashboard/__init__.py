"""The operator's dashboard, in reading order: `server` (the `longcall dashboard` command) →
`web` (the aiohttp app: routes, binding; `access`: its token wall, login cookie and security
headers; `guard`: its login throttle, redirect check, session links and render bound) →
`reader` (a session from the store or the live process) → `view` (the model's view of it:
summary, window, timeline) → `panels` (health tiles and the compaction chart); `static/`
holds its script and style (no CDN)."""
