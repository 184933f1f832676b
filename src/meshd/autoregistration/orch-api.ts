// WorkloadEntry writes through the orchestrator API (Istio writes through its CRD client): create, update
// and status update with the resourceVersion read (a conflict fails and is retried from a fresh read, as
// Istio's Update does), delete with a resourceVersion precondition.
import { OrchApiError, type OrchClient } from '../../config/orch/client';
import type { WorkloadEntryObject } from './entry';

/** What the controller needs of a store that can be written. */
export interface WorkloadEntryApi {
  get(apiVersion: string, namespace: string, name: string): Promise<WorkloadEntryObject | undefined>;
  create(obj: WorkloadEntryObject): Promise<WorkloadEntryObject>;
  update(obj: WorkloadEntryObject): Promise<WorkloadEntryObject>;
  updateStatus(obj: WorkloadEntryObject): Promise<WorkloadEntryObject>;
  /** Deletes if the object still has `resourceVersion`; a missing object is not an error. */
  delete(apiVersion: string, namespace: string, name: string, resourceVersion?: string): Promise<void>;
}

function entryPath(apiVersion: string, namespace: string, name?: string): string {
  const base = `/apis/${apiVersion}/namespaces/${encodeURIComponent(namespace)}/workloadentries`;
  return name === undefined ? base : `${base}/${encodeURIComponent(name)}`;
}

export function isNotFound(e: unknown): boolean {
  return e instanceof OrchApiError && e.statusCode === 404;
}

export function isAlreadyExists(e: unknown): boolean {
  return e instanceof OrchApiError && e.statusCode === 409 && e.reason === 'AlreadyExists';
}

export class OrchWorkloadEntries implements WorkloadEntryApi {
  constructor(private readonly client: OrchClient) {}

  async get(apiVersion: string, namespace: string, name: string): Promise<WorkloadEntryObject | undefined> {
    try {
      return (await this.client.getJson(entryPath(apiVersion, namespace, name))) as WorkloadEntryObject;
    } catch (e) {
      if (isNotFound(e)) return undefined;
      throw e;
    }
  }

  async create(obj: WorkloadEntryObject): Promise<WorkloadEntryObject> {
    return (await this.client.request('POST', entryPath(obj.apiVersion, obj.metadata.namespace), { body: obj })) as WorkloadEntryObject;
  }

  async update(obj: WorkloadEntryObject): Promise<WorkloadEntryObject> {
    return (await this.client.request('PUT', entryPath(obj.apiVersion, obj.metadata.namespace, obj.metadata.name), {
      body: obj,
    })) as WorkloadEntryObject;
  }

  async updateStatus(obj: WorkloadEntryObject): Promise<WorkloadEntryObject> {
    return (await this.client.request('PUT', `${entryPath(obj.apiVersion, obj.metadata.namespace, obj.metadata.name)}/status`, {
      body: obj,
    })) as WorkloadEntryObject;
  }

  async delete(apiVersion: string, namespace: string, name: string, resourceVersion?: string): Promise<void> {
    try {
      await this.client.request('DELETE', entryPath(apiVersion, namespace, name), {
        body: { kind: 'DeleteOptions', apiVersion: 'v1', ...(resourceVersion ? { preconditions: { resourceVersion } } : {}) },
      });
    } catch (e) {
      if (!isNotFound(e)) throw e;
    }
  }
}
