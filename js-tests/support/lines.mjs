// Reading a child process's output one line at a time (the test workers and holders
// speak one JSON object a line on stdout).

/** Calls `onLine(line)` for every complete line `stream` emits (without its '\n'). */
export function onLines(stream, onLine) {
  let buffered = '';
  stream.on('data', (chunk) => {
    buffered += chunk.toString('utf8');
    let nl;
    while ((nl = buffered.indexOf('\n')) !== -1) {
      const line = buffered.slice(0, nl);
      buffered = buffered.slice(nl + 1);
      onLine(line);
    }
  });
}
