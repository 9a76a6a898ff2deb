// The pack's errors as the server sends them: structured objects (ReuseError.to_dict())
//   {code, type, message, expected, actual, fix, details}
// found as `error` in the dry-run entries of POST /seedreuse/check, as `{"error": {...}}` in the
// bodies of refused /seedreuse/ requests, and as `seedreuse` in execution_error messages of
// prompts that failed in a SeedReuse node. Errors that are not ReuseErrors carry only
// {type, message}. The fields are read as given: no message text is parsed and no list of
// error types is kept here. Only exports.

// A normalized copy of a structured error, or null if `obj` is not one. `fallback` fills the
// type / message of a bare object (e.g. {} for a commit failure that is not a ReuseError).
export function asError(obj, fallback = {}) {
  if (!obj || typeof obj !== "object") return null;
  const str = (v) => (v === undefined || v === null ? "" : String(v));
  return {
    code: str(obj.code) || null,
    type: str(obj.type) || str(fallback.type) || "error",
    message: str(obj.message) || str(fallback.message),
    expected: obj.expected === undefined ? null : obj.expected,
    actual: obj.actual === undefined ? null : obj.actual,
    fix: str(obj.fix) || null,
    details: obj.details && typeof obj.details === "object" ? obj.details : {},
  };
}

export function fmtValue(v) {
  if (v === null || v === undefined) return "";
  if (typeof v === "object") {
    try {
      return JSON.stringify(v);
    } catch (_) {
      return String(v);
    }
  }
  return String(v);
}

// The error's name as shown to the user: its class name, else its code.
export function errorTitle(err) {
  return (err && (err.type || err.code)) || "error";
}

// What an error says in a badge, in few words: the fields it names when inputs differ from what
// the cache holds (a key mismatch's `details.fields`: "inputs changed: value:text, …"), else its
// message (`fallback` without an error). The whole error is in the toast and the tooltip.
export function errorSummary(err, fallback = "") {
  const listed = err && err.details && Array.isArray(err.details.fields) ? err.details.fields : [];
  const fields = listed.map((f) => (f && typeof f === "object" ? f.field : null)).filter((f) => f);
  if (fields.length) return `inputs changed: ${fields.slice(0, 3).join(", ")}${fields.length > 3 ? ", …" : ""}`;
  return (err && err.message) || String(fallback || "");
}

// Every line of the error: message, expected, actual, fix (the ones that are set).
export function errorLines(err) {
  if (!err) return [];
  const lines = [err.message];
  if (err.expected !== null && err.expected !== undefined) lines.push(`expected: ${fmtValue(err.expected)}`);
  if (err.actual !== null && err.actual !== undefined) lines.push(`actual: ${fmtValue(err.actual)}`);
  if (err.fix) lines.push(`fix: ${err.fix}`);
  return lines;
}

// The structured error of an execution_error message, or null when it is not the pack's.
export function executionError(detail) {
  if (!detail || !detail.seedreuse || typeof detail.seedreuse !== "object") return null;
  const type = String(detail.exception_type || "").split(".").pop();
  return asError(detail.seedreuse, { type, message: detail.exception_message });
}

// The structured error of a refused /seedreuse/ request (body {"error": {...}}).
export function responseError(status, body) {
  return asError(body && body.error) || { code: null, type: "HTTP", message: `HTTP ${status}`,
    expected: null, actual: null, fix: null, details: {} };
}

// A pack route through the host's api.fetchApi, its JSON answer read: the body, or an Error
// whose `seedreuse` is the structured error of the refused request (responseError) when the
// answer is not OK, not JSON or an {"error": ...} body. `body` (an object) makes it a JSON POST.
export async function requestJson(api, path, body) {
  const options = body === undefined ? undefined
    : { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) };
  const resp = await api.fetchApi(path, options);
  let answer = null;
  try {
    answer = await resp.json();
  } catch (_) {
    answer = null;
  }
  if (!resp.ok || !answer || answer.error) {
    const err = new Error(`SeedReuse ${path}: HTTP ${resp.status}`);
    err.seedreuse = responseError(resp.status, answer);
    throw err;
  }
  return answer;
}
