// The --configDir source and one-shot directory loading.
export { DEFAULT_FILE_DEBOUNCE_MS, FileConfigStore, type FileConfigStoreOptions } from './store';
export { type DirLoad, loadConfigDir, loadText, type FileLoad, type FileItem } from './load';
export { isConfigFileName, scanTree } from './walk';
