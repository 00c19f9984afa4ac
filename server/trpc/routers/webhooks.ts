import { viaOperation } from "../../operations/operation";
import {
  webhookCreate,
  webhookDeliveries,
  webhookDelete,
  webhookList,
  webhookRedeliver,
  webhookTest,
  webhookUpdate,
} from "../../operations/webhooks";
import { operationProcedure, router } from "../init";

/** Outgoing webhooks for the settings page: each procedure is the operation of the same name. */
export const webhooksRouter = router({
  list: operationProcedure(webhookList).query(viaOperation(webhookList)),
  deliveries: operationProcedure(webhookDeliveries).query(viaOperation(webhookDeliveries)),
  create: operationProcedure(webhookCreate).mutation(viaOperation(webhookCreate)),
  update: operationProcedure(webhookUpdate).mutation(viaOperation(webhookUpdate)),
  delete: operationProcedure(webhookDelete).mutation(viaOperation(webhookDelete)),
  test: operationProcedure(webhookTest).mutation(viaOperation(webhookTest)),
  redeliver: operationProcedure(webhookRedeliver).mutation(viaOperation(webhookRedeliver)),
});
