import { viaOperation } from "../../operations/operation";
import {
  templateDelete,
  templateDetect,
  templateGet,
  templateInstantiate,
  templateList,
  templateSave,
} from "../../operations/templates";
import { operationProcedure, router } from "../init";

/** Plan templates for the browser: each procedure is the operation of the same name. */
export const templatesRouter = router({
  detect: operationProcedure(templateDetect).query(viaOperation(templateDetect)),
  save: operationProcedure(templateSave).mutation(viaOperation(templateSave)),
  list: operationProcedure(templateList).query(viaOperation(templateList)),
  get: operationProcedure(templateGet).query(viaOperation(templateGet)),
  instantiate: operationProcedure(templateInstantiate).mutation(viaOperation(templateInstantiate)),
  delete: operationProcedure(templateDelete).mutation(viaOperation(templateDelete)),
});
