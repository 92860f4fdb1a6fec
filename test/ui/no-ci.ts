// Imported first by tests that drive Ink's own output: Ink reads CI / CONTINUOUS_INTEGRATION when it
// loads and then renders only the final frame, as CI runs set CI=true. (The cockpit drops them the
// same way on a terminal: src/cli.ts.) Module evaluation follows import order, so this runs first.
delete process.env.CI;
delete process.env.CONTINUOUS_INTEGRATION;
