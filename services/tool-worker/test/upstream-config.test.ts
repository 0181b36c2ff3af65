/** The gateway's upstream configuration: what it accepts, its defaults, and the errors that name what to fix. */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { listedName, parseUpstreams, prefixOf, readUpstreams } from '../src/upstreams/config.js';

const STDIO = { type: 'stdio', command: 'node', args: ['server.js'] };
const parse = (upstreams: unknown, env: NodeJS.ProcessEnv = {}) =>
  parseUpstreams(JSON.stringify({ upstreams }), env);

describe('upstream configuration', () => {
  it('fills the defaults: every tool, optional tasks, on_restart fail, concurrency 4, no tenant passed, `<name>_` prefix', () => {
    const [u] = parse([{ name: 'ev', transport: STDIO }]);
    assert.equal(u?.tools, '*');
    assert.equal(u?.taskSupport, 'optional');
    assert.equal(u?.onRestart, 'fail');
    assert.equal(u?.concurrency, 4);
    assert.equal(u?.passTenant, false);
    assert.equal(prefixOf(u!), 'ev_');
    assert.equal(listedName(u!, 'echo'), 'ev_echo');
  });

  it('refuses bad input with an error naming the field', () => {
    assert.throws(() => parseUpstreams('{', {}), /upstream configuration: not JSON/);
    assert.throws(() => parse([]), /upstream configuration: upstreams: /);
    assert.throws(() => parse([{ name: 'ev' }]), /upstreams\.0\.transport/);
    assert.throws(() => parse([{ name: 'e v', transport: STDIO }]), /upstreams\.0\.name: 1-32 of/);
    assert.throws(
      () => parse([{ name: 'ev', transport: { type: 'http', url: 'nope' } }]),
      /upstreams\.0\.transport\.url/,
    );
    assert.throws(
      () => parse([{ name: 'ev', transport: STDIO, onRestart: 'again' }]),
      /upstreams\.0\.onRestart/,
    );
    assert.throws(
      () => parse([{ name: 'ev', transport: STDIO, extra: 1 }]),
      /upstreams\.0: Unrecognized key/,
    );
    assert.throws(
      () =>
        parse([
          { name: 'ev', transport: STDIO },
          { name: 'ev', transport: STDIO },
        ]),
      /upstream ev is defined twice/,
    );
  });

  it('reads header secrets from the environment and refuses a variable that is not set', () => {
    const http = {
      type: 'http',
      url: 'http://127.0.0.1:1/mcp',
      headers: { authorization: { env: 'UP_TOKEN' } },
    };
    assert.throws(
      () => parse([{ name: 'h', transport: http }]),
      /header authorization names UP_TOKEN, which is not set/,
    );
    assert.equal(parse([{ name: 'h', transport: http }], { UP_TOKEN: 'x' }).length, 1);
  });

  it('leaves out a tool whose prefixed name breaks the tool-name rules', () => {
    const [u] = parse([{ name: 'ev', transport: STDIO }]);
    assert.equal(listedName(u!, 'has space'), null);
    assert.equal(listedName(u!, 'x'.repeat(126)), null);
  });

  it("accepts the README's example (examples/gateway/everything.json)", () => {
    const [u] = readUpstreams('examples/gateway/everything.json', {});
    assert.equal(u?.transport.type, 'stdio');
    assert.deepEqual(u?.tools, ['trigger-long-running-operation', 'echo', 'get-sum']);
  });

  it('takes --upstreams over TASKLINE_UPSTREAMS, and none when neither is given', () => {
    assert.deepEqual(readUpstreams(undefined, {}), []);
    const env = { TASKLINE_UPSTREAMS: JSON.stringify({ upstreams: [{ name: 'ev', transport: STDIO }] }) };
    assert.equal(readUpstreams(undefined, env)[0]?.name, 'ev');
    assert.throws(() => readUpstreams('/no/such/file.json', env), /\/no\/such\/file\.json cannot be read/);
  });
});
