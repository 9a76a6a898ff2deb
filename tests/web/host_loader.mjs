// Module resolution hooks (node:module register): the entry module's imports of ComfyUI's
// ../../scripts/app.js and ../../scripts/api.js resolve to the fakes the test set up.
export async function resolve(specifier, context, next) {
  for (const name of ["app", "api"]) {
    if (specifier.endsWith(`/scripts/${name}.js`)) {
      return { url: new URL(`./fake_${name}.mjs`, import.meta.url).href, shortCircuit: true };
    }
  }
  return next(specifier, context);
}
