import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  {
    ignores: [
      '**/dist/**',
      '**/node_modules/**',
      '.data/**',
      '.bench/**',
      'models/**',
      // Generated from control.proto (`pnpm --filter @taskline/control generate`), checked by its test.
      'packages/control/src/generated/**',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  {
    // Node.js 20 words a failing message-less assert.ok from the file's source, and tsx runs the
    // tests as one-line code: that search takes minutes, so one failed check hung a test file
    // until its 10-minute timeout. With a message it fails at once.
    files: ['**/test/**/*.ts', 'bench/**/*.ts', 'scripts/**/*.ts'],
    rules: {
      'no-restricted-syntax': [
        'error',
        {
          selector:
            "CallExpression[callee.object.name='assert'][callee.property.name='ok'][arguments.length=1]",
          message: 'Give assert.ok a message: without one Node.js 20 spends minutes wording the failure.',
        },
        {
          selector: "CallExpression[callee.name='assert'][arguments.length=1]",
          message: 'Give assert a message: without one Node.js 20 spends minutes wording the failure.',
        },
      ],
    },
  },
);
