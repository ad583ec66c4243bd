// Streaming clients for the fleet tests: one stream with a record of what arrived, and a closed-loop load of
// workers that stream back to back until told to stop.
const BODY = { prompt: 'Once upon a time', max_tokens: 16, temperature: 0, stream: true };

// Streams one completion from `url` with X-Request-Id `rid`. The record says when it started and ended, the
// HTTP status, how many data chunks arrived, whether it closed with [DONE], and the error that broke it.
export async function streamOnce(url, rid, { body = BODY, headers = {} } = {}) {
  const rec = { rid, start: Date.now(), end: 0, status: 0, chunks: 0, done: false, error: null, text: '' };
  try {
    const r = await fetch(url + '/v1/completions', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-Request-Id': rid, ...headers },
      body: JSON.stringify(body),
    });
    rec.status = r.status;
    const reader = r.body.getReader();
    const decoder = new TextDecoder();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      const piece = decoder.decode(value, { stream: true });
      rec.text += piece;
      rec.chunks += piece.split('data: {').length - 1;
    }
    rec.done = r.status === 200 && rec.text.trimEnd().endsWith('data: [DONE]');
  } catch (e) {
    rec.error = String(e.cause ?? e);
  }
  rec.end = Date.now();
  return rec;
}

// `workers` concurrent clients, each streaming one request after another until stop(); ids are
// `${prefix}-${n}`. stop() resolves to every record.
export function closedLoopLoad(url, workers, prefix, options = {}) {
  const records = [];
  let running = true;
  let n = 0;
  const loops = Array.from({ length: workers }, async () => {
    while (running) records.push(await streamOnce(url, `${prefix}-${n++}`, options));
  });
  return {
    records,
    async stop() {
      running = false;
      await Promise.all(loops);
      return records;
    },
  };
}
