// Failures of the I/O edge, each with a message that tells the user what to do.

/** An iptables/ip binary is not installed (or not in PATH). */
export class MissingBinaryError extends Error {
  constructor(readonly binaries: readonly string[]) {
    super(
      `${binaries.join(', ')} not found in PATH; mesh-iptables needs the iptables tools ` +
        '(iptables, iptables-save, iptables-restore and their ip6tables variants) and iproute2',
    );
    this.name = 'MissingBinaryError';
  }
}

/** The kernel refused: the process lacks CAP_NET_ADMIN in the target network namespace. */
export class PermissionError extends Error {
  constructor(command: string, detail: string) {
    super(
      `${command}: permission denied; mesh-iptables must run as root or with CAP_NET_ADMIN and CAP_NET_RAW ` +
        `in the target network namespace (${detail.trim().split('\n')[0]})`,
    );
    this.name = 'PermissionError';
  }
}

/** An iptables command failed for another reason; carries its stderr. */
export class XtablesError extends Error {
  constructor(
    readonly command: string,
    readonly stderr: string,
    hint = '',
  ) {
    super(`${command} failed: ${stderr.trim() || 'no error output'}${hint ? `; ${hint}` : ''}`);
    this.name = 'XtablesError';
  }
}

/** Existing MESH_ chains differ from the requested rules and neither --reconcile nor --force-apply was given. */
export class DriftError extends Error {
  constructor(details: readonly string[]) {
    super(
      `existing MESH_ iptables chains differ from the requested configuration (${details.join('; ')}); ` +
        'rerun with --reconcile to replace them, or --cleanup-only to remove them',
    );
    this.name = 'DriftError';
  }
}

const PERMISSION_PATTERNS = [/permission denied/i, /operation not permitted/i, /you must be root/i];

export function looksLikePermissionProblem(stderr: string): boolean {
  return PERMISSION_PATTERNS.some((p) => p.test(stderr));
}
