// Loaded by nbsubagents into every pi 0.x child: pi 0.73 writes the whole message so far into each streaming
// `message_update` (twice: the event's `message` and its `assistantMessageEvent.partial`), so a tool argument of
// N bytes in small deltas makes a stream of N² bytes: 50 KB made 212 MB, and at 100 KB node's write queue passed
// 2 GiB and pi died with ENOBUFS. nbsubagents reads nothing from these snapshots (the deltas, message_end and the
// tool events carry it all; pi 1.x sends no snapshots), so they are emptied before pi writes the event.
//
// Extension handlers run before pi writes an event, and they get the event's own `message` (a shallow copy made
// for this event alone) and `assistantMessageEvent` (the provider's object for this one delta, already read by
// the agent loop): emptying them changes what is written, not what pi builds.
export default function (pi) {
  pi.on("message_update", (event) => {
    const update = event.assistantMessageEvent;
    if (update && typeof update === "object") delete update.partial;
    if (event.message && typeof event.message === "object") event.message.content = [];
  });
}
