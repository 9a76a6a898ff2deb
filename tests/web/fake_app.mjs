export const app = globalThis.__seedreuseFakeApp;
