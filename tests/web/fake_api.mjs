export const api = globalThis.__seedreuseFakeApi;
