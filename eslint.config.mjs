// typescript-eslint's recommended rules, plus the type-aware promise rules (cheap: one program),
// over src/, test/ and bench/; run by `npm run lint` and so by `npm test`. Every exception is
// listed here, per file and counted, and scripts/lint.mjs fails when a file's count differs from
// its entry (more: a new offence; fewer: lower the entry); none is a warning.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/**
 * Functions over 70 lines today, per file (count). New code stays under the limit; an entry goes
 * when its file is split. src/projections/record.ts belongs to the kernel restructuring (issue 20
 * item 2); the test entries are `describe` bodies holding their cases.
 */
export const longFunctions = {
  'src/projections/record.ts': 1, // evolveDraft, 121 lines
  'bench/nats.ts': 1, // report, 73
  'test/conformance/transport.ts': 2, // coreRules 77, durableRules 267
  'test/faults/nats-chaos.test.ts': 1,
  'test/faults/nats-coordinators.test.ts': 1,
  'test/faults/nats-faults.test.ts': 1,
  'test/faults/nats-lost-writes.test.ts': 1,
  'test/integration/cli-nats.test.ts': 1,
  'test/integration/examples.test.ts': 1,
  'test/integration/http.test.ts': 1,
  'test/integration/package.test.ts': 1,
  'test/integration/nats-deployment.test.ts': 1,
  'test/integration/nats-e2e.test.ts': 2,
  'test/integration/nats-permissions.test.ts': 1,
  'test/integration/nats-presence.test.ts': 1,
  'test/integration/nats-pubacks.test.ts': 1,
  'test/integration/nats-streams.test.ts': 1,
  'test/integration/observability.test.ts': 1,
  'test/integration/trust-subjects.test.ts': 1,
  'test/unit/http.test.ts': 2,
};

/**
 * Non-null assertions in src/ today, per file (count), in the files the kernel restructuring
 * rewrites (issue 20 items 2 and 4). Everywhere else in src/ a value that may be absent is checked.
 */
export const nonNullAssertions = {
  'src/domain/admission.ts': 1,
  'src/domain/decide.ts': 4,
  'src/projections/record.ts': 5,
  'src/projections/views.ts': 9,
  'src/runtime/group-commit.ts': 3,
  'src/runtime/outbox.ts': 2,
};

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'examples/**', '**/*.js', '**/*.cjs', '**/*.mjs'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      'max-lines-per-function': ['error', { max: 70 }],
      '@typescript-eslint/no-non-null-assertion': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/no-floating-promises': [
        'error',
        { allowForKnownSafeCalls: [{ from: 'package', package: 'node:test', name: ['test', 'it', 'describe', 'suite'] }] },
      ],
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_', ignoreRestSiblings: true },
      ],
    },
  },
  {
    // Tests and benchmarks look up what they just created: a missing value fails the test anyway.
    files: ['test/**/*.ts', 'bench/**/*.ts'],
    rules: { '@typescript-eslint/no-non-null-assertion': 'off' },
  },
);
