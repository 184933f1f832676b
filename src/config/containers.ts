// The names the injector gives a pod's mesh containers (Istio's pkg/config/constants: istio-proxy,
// istio-init, istio-validation, under our naming). Every program that reads pods by these names (the
// injector, the CNI plugin, meshctl bug-report) takes them from here.
export const PROXY_CONTAINER = 'mesh-proxy';
export const VALIDATION_CONTAINER = 'mesh-validation';
/** A pod with this init container programs its own rules (the mesh is installed without CNI there). */
export const INIT_CONTAINER = 'mesh-init';
