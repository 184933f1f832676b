// Istio's auto-registration metrics (pilot/pkg/autoregistration controller.go): plain sums, no labels.
import { defineCounter } from '../../lib/metrics';

export const autoRegistrationSuccess = defineCounter({
  name: 'auto_registration_success_total',
  help: 'Total number of successful auto registrations.',
});
export const autoRegistrationUpdates = defineCounter({ name: 'auto_registration_updates_total', help: 'Total number of auto registration updates.' });
export const autoRegistrationUnregistrations = defineCounter({
  name: 'auto_registration_unregister_total',
  help: 'Total number of unregistrations.',
});
export const autoRegistrationDeletes = defineCounter({
  name: 'auto_registration_deletes_total',
  help: 'Total number of auto registration cleaned up by periodic timer.',
});
export const autoRegistrationErrors = defineCounter({ name: 'auto_registration_errors_total', help: 'Total number of auto registration errors.' });
