// Lints the extension's TypeScript with the recommended rules of typescript-eslint.
import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["out/**", "node_modules/**"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ["src/**/*.ts"],
    rules: {
      eqeqeq: "error",
      curly: "error",
      "@typescript-eslint/no-floating-promises": "off"
    }
  }
);
