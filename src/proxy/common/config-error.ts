// The error every engine translator throws for a resource Envoy would reject: the message names where in the
// resource the fault is (Envoy's EnvoyException from config validation), and the xDS client NACKs with it.

/** Config error naming where in the resource it is. */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}
