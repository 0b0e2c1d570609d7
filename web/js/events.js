// One EventSource on /api/v1/events for the whole app (the session cookie authenticates it); pages
// subscribe by kind. On reconnect the browser sends Last-Event-ID, so nothing is missed unless the
// daemon's buffer ran past us: then it sends `gap` and pages reload what they show.

const KINDS = ["run_state", "experiment_submitted", "metrics", "gpu", "alert", "gap"];

class EventHub {
  constructor() {
    this.handlers = new Map();
    this.source = null;
    this.state = "connecting";
    this.lastGpu = null; // the latest `gpu` event, for pages opened between two readings
  }

  start() {
    if (this.source) return;
    const es = new EventSource("/api/v1/events");
    this.source = es;
    for (const kind of KINDS) {
      es.addEventListener(kind, (e) => {
        let data;
        try {
          data = JSON.parse(e.data);
        } catch {
          return;
        }
        if (kind === "gpu") this.lastGpu = data;
        this.emit(kind, data);
      });
    }
    es.onopen = () => this.setState("live");
    es.onerror = () => {
      if (es.readyState === EventSource.CLOSED) {
        // Refused for good (signed out, or too many streams): try again later, and let the next
        // API call find out whether we are still signed in.
        this.source = null;
        this.setState("offline");
        setTimeout(() => this.start(), 5000);
      } else {
        this.setState("reconnecting");
      }
    };
  }

  setState(state) {
    if (state === this.state) return;
    this.state = state;
    this.emit("connection", { state });
  }

  // on("metrics", fn) -> a function that unsubscribes.
  on(kind, fn) {
    if (!this.handlers.has(kind)) this.handlers.set(kind, new Set());
    this.handlers.get(kind).add(fn);
    return () => this.handlers.get(kind)?.delete(fn);
  }

  emit(kind, data) {
    for (const fn of [...(this.handlers.get(kind) || [])]) {
      try {
        fn(data);
      } catch (e) {
        // A bug in a page: let it surface as a page error, without stopping the other handlers.
        setTimeout(() => {
          throw e;
        });
      }
    }
  }
}

export const events = new EventHub();
