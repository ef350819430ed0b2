import * as effectEslint from "@effect/eslint-plugin"
import { defineConfig, globalIgnores } from "eslint/config"
import { builtinModules } from "node:module"
import tseslint from "typescript-eslint"

const nodeBuiltins = {
  paths: builtinModules.filter((name) => !name.startsWith("_")).map((name) => ({
    name,
    message: "Pure packages do no IO: Node implementations belong in @lifeline/node."
  })),
  patterns: [{
    regex: "^node:",
    message: "Pure packages do no IO: Node implementations belong in @lifeline/node."
  }]
}

const hermesNode = {
  regex: "^@lifeline/hermes-node(/|$)",
  message:
    "hermes is written against kernel and platform Tags: its Node wiring (@lifeline/hermes-node) depends on it, not the reverse."
}

const lifelineSqlite = {
  regex: "^(@lifeline/sqlite(/|$)|node:sqlite$)",
  message: "@lifeline/node has no SQLite: the journal lives in @lifeline/sqlite, which depends on @lifeline/node."
}

const lifelineNode = {
  regex: "^@lifeline/node(/|$)",
  message:
    "jsonrpc, kernel, process, testing and journal must not depend on @lifeline/node: depend on kernel Tags instead."
}

const lifelineJournal = {
  regex: "^@lifeline/journal(/|$)",
  message:
    "jsonrpc, kernel, process and testing must not depend on @lifeline/journal: the journal depends on the kernel, not the reverse."
}

const kernelRooms = {
  regex: "^@lifeline/(process|testing)(/|$)",
  message:
    "the kernel's sources must not import @lifeline/process or @lifeline/testing: they depend on the kernel, not the reverse."
}

export default defineConfig(
  globalIgnores(["**/node_modules/", "**/build/", "**/dist/", "**/coverage/", "**/.vitest-cache/"]),
  tseslint.configs.recommended,
  effectEslint.configs.dprint,
  {
    files: ["**/*.{ts,mts,cts,js,mjs,cjs}"],
    rules: {
      "@effect/dprint": ["error", {
        config: {
          indentWidth: 2,
          lineWidth: 120,
          semiColons: "asi",
          quoteStyle: "alwaysDouble",
          trailingCommas: "never",
          operatorPosition: "maintain",
          "arrowFunction.useParentheses": "force"
        }
      }],
      "@typescript-eslint/array-type": ["error", { default: "generic", readonly: "generic" }],
      "@typescript-eslint/consistent-type-imports": "error",
      "@typescript-eslint/no-empty-object-type": "off",
      "@typescript-eslint/no-explicit-any": "off",
      "@typescript-eslint/no-namespace": "off",
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "object-shorthand": "error"
    }
  },
  {
    files: ["packages/*/src/**", "packages/*/test/**", "test/**"],
    rules: {
      "no-console": "error"
    }
  },
  {
    files: ["packages/*/src/**"],
    rules: {
      "@effect/no-import-from-barrel-package": ["error", {
        // Effect 4 moved @effect/platform, @effect/sql, @effect/rpc, @effect/cluster into `effect` itself: each of its
        // subpath barrels (see effect's package.json `exports`) is a barrel too.
        packageNames: [
          "effect",
          "effect/ai",
          "effect/cli",
          "effect/cluster",
          "effect/crypto",
          "effect/devtools",
          "effect/encoding",
          "effect/eventlog",
          "effect/graphql",
          "effect/http",
          "effect/http-api",
          "effect/net",
          "effect/observability",
          "effect/persistence",
          "effect/process",
          "effect/reactivity",
          "effect/rpc",
          "effect/schema",
          "effect/socket",
          "effect/sql",
          "effect/testing",
          "effect/workers",
          "effect/workflow",
          "@effect/platform-node",
          "@lifeline/jsonrpc",
          "@lifeline/kernel",
          "@lifeline/process",
          "@lifeline/testing",
          "@lifeline/journal",
          "@lifeline/node",
          "@lifeline/sqlite",
          "@lifeline/postgres",
          "@lifeline/fleet",
          "@lifeline/hermes",
          "@lifeline/hermes-node",
          "@lifeline/mcp"
        ]
      }]
    }
  },
  // A later block replaces the options of an earlier one, so each block lists every restriction for its files.
  {
    files: ["packages/{jsonrpc,kernel}/**"],
    rules: {
      "no-restricted-imports": ["error", { patterns: [lifelineNode, lifelineJournal] }]
    }
  },
  {
    files: ["packages/{jsonrpc,kernel}/src/**"],
    rules: {
      "no-restricted-imports": ["error", {
        paths: nodeBuiltins.paths,
        patterns: [...nodeBuiltins.patterns, lifelineNode, lifelineJournal, kernelRooms]
      }]
    }
  },
  {
    files: ["packages/{process,testing}/**"],
    rules: {
      "no-restricted-imports": ["error", { patterns: [lifelineNode, lifelineJournal] }]
    }
  },
  {
    files: ["packages/{process,testing}/src/**"],
    rules: {
      "no-restricted-imports": ["error", {
        paths: nodeBuiltins.paths,
        patterns: [...nodeBuiltins.patterns, lifelineNode, lifelineJournal]
      }]
    }
  },
  {
    files: ["packages/journal/**"],
    rules: {
      "no-restricted-imports": ["error", { patterns: [lifelineNode] }]
    }
  },
  {
    files: ["packages/journal/src/**"],
    rules: {
      "no-restricted-imports": ["error", {
        paths: nodeBuiltins.paths,
        patterns: [...nodeBuiltins.patterns, lifelineNode]
      }]
    }
  },
  {
    files: ["packages/node/**"],
    rules: {
      "no-restricted-imports": ["error", { patterns: [lifelineSqlite] }]
    }
  },
  {
    files: ["packages/hermes/**"],
    rules: {
      "no-restricted-imports": ["error", { patterns: [hermesNode] }]
    }
  },
  {
    files: ["packages/hermes/src/**"],
    rules: {
      "no-restricted-imports": ["error", {
        paths: nodeBuiltins.paths,
        patterns: [...nodeBuiltins.patterns, hermesNode]
      }]
    }
  }
)
