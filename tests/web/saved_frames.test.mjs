// The cache browser and the take picker show a take's frames as the user saved them: the output
// video cut at the audio's end (output_frames), and what the cache keeps beside it (frames), as
// the routes report them (nodes/cache_routes.py, media/take_output.py).
import { test } from "node:test";
import assert from "node:assert/strict";
import { installGlobals } from "./fake_host.mjs";

installGlobals();
const { framesText } = await import("../../web/seedreuse/core.js");
const { inspectLines } = await import("../../web/seedreuse/cache_browser.js");

const TRIMMED = { frames: 225, output_frames: 160, trimmed: 65,
  trim: "trimmed the last segment's 65 surplus frame(s) past the audio's end: 160 frames; the cache keeps all 225" };

test("a trimmed take shows its saved frames first, and what the cache keeps", () => {
  assert.equal(framesText(TRIMMED), "160 frames (the cache keeps 225: 65 past the audio's end trimmed)");
  assert.equal(framesText({ frames: 13, output_frames: 13, trimmed: 0 }), "13 frames");
  assert.equal(framesText({ frames: 13 }), "13 frames");          // a route of before the trim
});

test("inspect lists the saved frames of the version and of every take, and the trim's outcome", () => {
  const row = { version: "v1", created_at: 1, last_used: 2, run: { run_id: "r", host: "h", pid: 1, prompt_id: "p" },
    bytes: 10, manifest_bytes: 10, slots: {}, boundaries: 2, files: {},
    segments: { S: 3, F: 81, M: 9, fps: 16, seed: 5, ...TRIMMED },
    takes: [{ take: 2, seed: 5, segments: 3, result: "result.mp4", bytes: 9, source_take: 1, ...TRIMMED },
      { take: 1, seed: 4, segments: 3, result: "take-000001.result.mp4", bytes: 9, frames: 225, output_frames: 225,
        trimmed: 0 }] };
  const lines = inspectLines(row);
  const seg = lines.find((l) => l.startsWith("segments:"));
  assert.match(seg, /16 fps, 160 frames \(the cache keeps 225: 65 past the audio's end trimmed\), seed 5/);
  assert.ok(lines.includes(`output video: ${TRIMMED.trim}`), lines.join("\n"));
  assert.match(lines.find((l) => l.startsWith("take 2:")), /seed 5, 160 frames \(the cache keeps 225/);
  assert.match(lines.find((l) => l.startsWith("take 1:")), /seed 4, 225 frames, 3 segment\(s\)/);
});
