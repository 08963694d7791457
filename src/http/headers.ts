/**
 * What every response of the facade carries, whatever it holds (a result, an error naming what the
 * request sent, an event stream, the metrics): a body holding a peer's or a caller's text is never
 * sniffed into markup (nosniff), never framed, loads nothing and runs nothing if opened in a
 * browser (its content security policy), and sends no Referer. The console's page and files carry
 * their own, wider policy (console.ts), which lets the page run its own script.
 */
export const protectiveHeaders: Readonly<Record<string, string>> = {
  'content-security-policy': "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
};
