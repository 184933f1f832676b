// Sharing equal immutable values: thousands of holders (proxies' watches in discovery, routes and hosts in the
// engine) keep one copy of each distinct value instead of one each.

/**
 * Values shared by fingerprint while something still holds them: a later value the caller finds equal gets the
 * first one instead; an unequal one under the same fingerprint (a collision) stays unshared. Entries go with
 * their value, so the table never outgrows what is in use.
 */
export class WeakInterner<T extends object> {
  private readonly byFingerprint = new Map<string, WeakRef<T>>();
  private readonly forget = new FinalizationRegistry<string>((fp) => {
    if (this.byFingerprint.get(fp)?.deref() === undefined) this.byFingerprint.delete(fp);
  });

  /**
   * The known value equal to `fresh`, else `fresh`; `onShared` runs when `fresh` becomes the shared one.
   * `equal` defaults to "the fingerprint is the whole content".
   */
  intern(fp: string, fresh: T, equal: (known: T) => boolean = () => true, onShared?: (v: T) => void): T {
    const known = this.byFingerprint.get(fp)?.deref();
    if (known) return equal(known) ? known : fresh;
    this.byFingerprint.set(fp, new WeakRef(fresh));
    this.forget.register(fresh, fp);
    onShared?.(fresh);
    return fresh;
  }
}
